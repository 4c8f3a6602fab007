"""Provider transports against loopback stand-ins of their HTTP APIs."""
