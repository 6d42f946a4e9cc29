"""`cgp_` ids: minted by hand (ids.py says why), checked against python-ulid's reading."""

from __future__ import annotations

import time

from ulid import ULID

from rafka_actors.ids import CGP_PREFIX, mint_group_uuid

CROCKFORD = set("0123456789abcdefghjkmnpqrstvwxyz")


def test_a_minted_id_is_cgp_and_a_lower_case_ulid_of_now() -> None:
    before = time.time_ns() // 1_000_000
    minted = mint_group_uuid()
    after = time.time_ns() // 1_000_000
    assert minted.startswith(CGP_PREFIX)
    text = minted.removeprefix(CGP_PREFIX)
    assert len(text) == 26 and set(text) <= CROCKFORD
    parsed = ULID.from_str(text.upper())
    assert str(parsed).lower() == text
    assert before <= int(parsed.milliseconds) <= after


def test_minted_ids_differ_and_every_random_position_takes_every_character() -> None:
    minted = [mint_group_uuid().removeprefix(CGP_PREFIX) for _ in range(5_000)]
    assert len(set(minted)) == len(minted)
    randoms = [text[10:] for text in minted]
    assert {char for text in randoms for char in text} == CROCKFORD  # every character comes
    # (a stuck position would repeat one character)
    for position in range(16):
        assert len({text[position] for text in randoms}) == 32
