"""Transports by URL: SMTP and the outbox (broadside.delivery.smtp, eml_folder), and the providers' HTTP APIs
(one module each on one urllib3 client; SES through botocore, its official SDK).

`factory.make_transport(url)` is the one factory; `urls.check_transport_url` validates a URL
first and `urls.describe` shows one without its secrets.
"""
