"""The System page: what the sender is doing, what is wrong, and the outbox."""
