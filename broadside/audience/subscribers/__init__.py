"""Subscribers: the person and their subscriptions (`service`), the owner's table (`search`,
`bulk`), the dashboard's growth (`growth`) and a subscriber's own data (`personal_data`)."""
