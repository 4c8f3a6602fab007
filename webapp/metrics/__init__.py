"""Prometheus metrics: the collector, and the route that serves it."""
