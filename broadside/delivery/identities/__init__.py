"""Sending identities: who mail is from and the paced stream it goes out on."""
