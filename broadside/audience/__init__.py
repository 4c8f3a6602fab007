"""The people: subscribers (`subscribers/`: the person, search, bulk actions, growth, their own
data), lists (`lists`), sign-up and double opt-in (`signup`), CSV import and export
(`transfer/`), and leaving: unsubscribe and suppression (`unsubscribe/`).

It sits above `campaigns` because joining a list enters its welcome automations in the same
transaction as the subscription (invariant: welcomes are written with what they welcome), and
erasing a person or deleting a list forgets their automation rows in the same transaction."""
