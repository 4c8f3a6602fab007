"""Delivery events from the mail provider: bounces and complaints that suppress addresses."""
