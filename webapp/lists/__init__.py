"""Mailing lists: the owner's pages (views) and the domain functions (service)."""
