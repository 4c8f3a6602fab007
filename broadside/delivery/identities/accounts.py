"""Identities grouped by the provider account they send through (`transport_urls.account_of`):
the account's one ceiling, and who shares it.

`account_rate` is set per identity, and the account's ceiling is the smallest value set on
any identity of the account (the default's is ACCOUNT_RATE): every identity of the account
shows it, and its streams keep to it together (broadside.delivery.account_limit). Smallest,
because two values for one provider limit can only mean that one of them is too high."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

from broadside.core.transport_urls import account_label, account_of


class HasAccount(Protocol):
    @property
    def transport_url(self) -> str: ...

    @property
    def account_rate(self) -> float | None: ...


T = TypeVar("T", bound=HasAccount)


def smallest_rate(url: str, rates: Iterable[tuple[str, float | None]]) -> float | None:
    """The smallest rate set among `(transport URL, rate)` pairs of `url`'s account."""
    account = account_of(url)
    if account is None:
        return None
    found = [rate for other, rate in rates if rate is not None and account_of(other) == account]
    return min(found) if found else None


def with_shared_rates(identities: Sequence[T]) -> list[T]:
    """Each identity with its account's ceiling in `account_rate`."""
    pairs = [(i.transport_url, i.account_rate) for i in identities]
    return [replace(i, account_rate=smallest_rate(i.transport_url, pairs))  # type: ignore[type-var]
            for i in identities]


@dataclass(frozen=True)
class Account(Generic[T]):
    """The identities of one provider account, in the order given."""

    label: str  # shown: `account_label`, secrets masked
    url: str  # a transport URL of the account (secret: for the account's HMAC only)
    members: tuple[T, ...]


def grouped(identities: Sequence[T]) -> list[Account[T]]:
    """The identities by account, accounts in the order of their first identity; the outbox
    (no provider, no account) is an account of its own for each identity that uses it."""
    groups: dict[object, list[T]] = {}
    for index, identity in enumerate(identities):
        account = account_of(identity.transport_url)
        groups.setdefault(account if account is not None else ("outbox", index), []).append(identity)
    return [Account(account_label(members[0].transport_url), members[0].transport_url,
                    tuple(members)) for members in groups.values()]


def sharing_with(url: str, others: Iterable[tuple[str, str]]) -> list[str]:
    """The names among `(name, transport URL)` pairs that send through `url`'s account."""
    account = account_of(url)
    if account is None:
        return []
    return [name for name, other in others if account_of(other) == account]
