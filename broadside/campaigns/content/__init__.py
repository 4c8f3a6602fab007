"""What a message says, before it is frozen: its body as written (in its format), the reusable
blocks it names, and the templates an owner starts from."""
