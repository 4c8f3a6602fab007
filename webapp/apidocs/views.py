"""Routes of the API's description (on `webapp.apidocs.bp`)."""
