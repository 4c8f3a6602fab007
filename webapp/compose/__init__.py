"""What the compose pages share: moving a body between compose modes (`views`)."""
