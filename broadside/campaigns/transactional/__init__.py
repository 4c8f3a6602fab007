"""The owner's transactional templates and the API's one-off mail sent from them."""
