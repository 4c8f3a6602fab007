"""Imports the API modules of each feature so their routes attach to the blueprint."""
