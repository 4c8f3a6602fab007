"""The public, double opt-in sign-up form of a list and its confirmation link."""
