"""The demo's data: a small "cards" library with two real bugs, and the two tickets that
fix them. Pure data; ``orchestrator.demo.run`` turns it into repositories, patches and tickets.

The library's own tests pass on the buggy code because they do not cover the bugs:
  * ``deal(deck, n)`` iterates ``range(1, n)`` and so hands out one card too few;
  * ``hand_value`` counts every ace as 11, even when that busts the hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class CommitSpec:
    message: str
    files: Mapping[str, str]  # path → full new contents


@dataclass(frozen=True)
class TicketSpec:
    id: str
    title: str
    body: str
    commits: tuple[CommitSpec, ...]


def replace_once(text: str, old: str, new: str) -> str:
    """Derive a fixed file from the buggy one, failing loudly if the two drift apart."""
    if text.count(old) != 1:
        raise ValueError(f"expected exactly one {old!r} in the demo source")
    return text.replace(old, new)


README_MD = """\
# cards

A small playing-card library: a 52-card deck, dealing, and blackjack hand values.

Run the tests with the standard library only:

    python -m unittest discover -s tests -t .
"""

GITIGNORE = "__pycache__/\n"

INIT_PY = '''"""Playing cards: a deck, dealing, and blackjack hand values."""
'''

DECK_PY = '''"""A standard 52-card deck: build it, shuffle it, deal from the top."""

from __future__ import annotations

import random
from dataclasses import dataclass

RANKS = ("2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K", "A")
SUITS = ("clubs", "diamonds", "hearts", "spades")


@dataclass(frozen=True)
class Card:
    rank: str
    suit: str

    def __str__(self) -> str:
        return f"{self.rank} of {self.suit}"


def new_deck(rng: random.Random | None = None) -> list[Card]:
    """All 52 cards, shuffled when ``rng`` is given (seed it for a repeatable game)."""
    deck = [Card(rank, suit) for suit in SUITS for rank in RANKS]
    if rng is not None:
        rng.shuffle(deck)
    return deck


def deal(deck: list[Card], n: int) -> list[Card]:
    """Take ``n`` cards off the top of ``deck`` (its end), in the order they are dealt."""
    if not 0 <= n <= len(deck):
        raise ValueError(f"cannot deal {n} cards from a deck of {len(deck)}")
    return [deck.pop() for _ in range(1, n)]
'''

HAND_PY = '''"""Blackjack hand values."""

from __future__ import annotations

from collections.abc import Iterable

from cards.deck import Card

ACE = "A"
FACE_VALUES = {"J": 10, "Q": 10, "K": 10}
BLACKJACK = 21


def card_value(card: Card) -> int:
    """Pip cards count their number, faces 10, an ace 11 (``hand_value`` may lower it)."""
    if card.rank == ACE:
        return 11
    return FACE_VALUES.get(card.rank) or int(card.rank)


def hand_value(cards: Iterable[Card]) -> int:
    """The hand's best total: each ace counts 11, or 1 where 11 would bust the hand."""
    return sum(card_value(card) for card in cards)


def is_bust(cards: Iterable[Card]) -> bool:
    return hand_value(cards) > BLACKJACK
'''

TEST_DECK_PY = """import random
import unittest

from cards.deck import Card, deal, new_deck


class NewDeckTest(unittest.TestCase):
    def test_has_52_distinct_cards(self):
        deck = new_deck()
        self.assertEqual(len(deck), 52)
        self.assertEqual(len(set(deck)), 52)

    def test_shuffle_is_repeatable_with_a_seed(self):
        self.assertEqual(new_deck(random.Random(7)), new_deck(random.Random(7)))
        self.assertNotEqual(new_deck(random.Random(7)), new_deck())

    def test_card_reads_naturally(self):
        self.assertEqual(str(Card("Q", "hearts")), "Q of hearts")


class DealTest(unittest.TestCase):
    def test_deals_from_the_top(self):
        deck = new_deck()
        top = deck[-1]
        self.assertEqual(deal(deck, 2)[0], top)

    def test_refuses_more_cards_than_the_deck_holds(self):
        with self.assertRaises(ValueError):
            deal(new_deck(), 53)
"""

TEST_HAND_PY = """import unittest

from cards.deck import Card
from cards.hand import hand_value, is_bust


def cards(*ranks):
    return [Card(rank, "spades") for rank in ranks]


class HandValueTest(unittest.TestCase):
    def test_pip_and_face_cards(self):
        self.assertEqual(hand_value(cards("K", "7")), 17)

    def test_ace_and_ten_is_blackjack(self):
        self.assertEqual(hand_value(cards("A", "K")), 21)

    def test_over_21_is_bust(self):
        self.assertTrue(is_bust(cards("K", "Q", "5")))

    def test_empty_hand_is_zero(self):
        self.assertEqual(hand_value([]), 0)
"""

PROJECT_FILES: Mapping[str, str] = {
    "README.md": README_MD,
    ".gitignore": GITIGNORE,
    "cards/__init__.py": INIT_PY,
    "cards/deck.py": DECK_PY,
    "cards/hand.py": HAND_PY,
    "tests/__init__.py": "",
    "tests/test_deck.py": TEST_DECK_PY,
    "tests/test_hand.py": TEST_HAND_PY,
}

DEAL_COUNT_TESTS = """

class DealCountTest(unittest.TestCase):
    def test_deals_exactly_n_cards(self):
        deck = new_deck()
        self.assertEqual(len(deal(deck, 5)), 5)
        self.assertEqual(len(deck), 47)

    def test_can_deal_the_whole_deck(self):
        deck = new_deck()
        self.assertEqual(len(deal(deck, 52)), 52)
        self.assertEqual(deck, [])
"""

SOFT_ACE_TESTS = """

class SoftAceTest(unittest.TestCase):
    def test_ace_drops_to_one_rather_than_bust(self):
        self.assertEqual(hand_value(cards("A", "K", "5")), 16)

    def test_two_aces_make_twelve(self):
        self.assertEqual(hand_value(cards("A", "A")), 12)

    def test_only_as_many_aces_drop_as_needed(self):
        self.assertEqual(hand_value(cards("A", "A", "9")), 21)

    def test_soft_hand_is_not_bust(self):
        self.assertFalse(is_bust(cards("A", "9", "5")))
"""

HAND_VALUE_FIXED = """    held = list(cards)
    total = sum(card_value(card) for card in held)
    soft_aces = sum(1 for card in held if card.rank == ACE)
    while total > BLACKJACK and soft_aces:
        total -= 10  # this ace counts 1 instead of 11
        soft_aces -= 1
    return total
"""

CARDS_1 = TicketSpec(
    id="CARDS-1",
    title="deal() hands out one card too few",
    body="""\
`deal(deck, n)` returns `n - 1` cards, and the deck shrinks by `n - 1`. Dealing a
five-card poker hand gives four cards; `deal(deck, 1)` gives none at all.

Seen in the table app: every player starts one card short, and the last hand of a full
deck leaves a card behind.

Expected: `deal(deck, n)` takes exactly `n` cards off the top of the deck and returns
them; the deck is left with `len(deck) - n` cards. Asking for more cards than the deck
holds still raises `ValueError`.

Add a test that counts both the cards dealt and the cards left.
""",
    commits=(
        # The squashed shape from the worked example: the fix and its test in one commit,
        # which lint-bug-commit-order rejects.
        CommitSpec(
            message="Fix off-by-one in deal()\n\n"
            "deal() iterated range(1, n) and so handed out n - 1 cards. Deal n, and add\n"
            "tests that count the cards dealt and the cards left in the deck.\n",
            files={
                "cards/deck.py": replace_once(DECK_PY, "range(1, n)", "range(n)"),
                "tests/test_deck.py": TEST_DECK_PY + DEAL_COUNT_TESTS,
            },
        ),
    ),
)

CARDS_2 = TicketSpec(
    id="CARDS-2",
    title="hand_value() never counts an ace as 1",
    body="""\
`hand_value` counts every ace as 11, so a soft hand busts when it should not:
ace, king, five is scored 26 (bust) instead of 16, and a pair of aces is 22.

Blackjack rules: an ace counts 11, or 1 when 11 would take the hand over 21; with
several aces, only as many drop to 1 as are needed.

Expected: A+K+5 = 16, A+A = 12, A+A+9 = 21, and `is_bust` is false for A+9+5.
Fix the scoring first, then add tests pinning these values.
""",
    commits=(
        CommitSpec(
            message="Count an ace as 1 when 11 would bust the hand\n\n"
            "hand_value() scored every ace as 11. Lower aces to 1, one at a time, while\n"
            "the total is over 21.\n",
            files={
                "cards/hand.py": replace_once(
                    HAND_PY,
                    "    return sum(card_value(card) for card in cards)\n",
                    HAND_VALUE_FIXED,
                ),
            },
        ),
        CommitSpec(
            message="Add tests pinning soft-ace hand values\n",
            files={"tests/test_hand.py": TEST_HAND_PY + SOFT_ACE_TESTS},
        ),
    ),
)

FACE_NAMES_TESTS = """

class CardNameTest(unittest.TestCase):
    def test_face_cards_print_their_names(self):
        self.assertEqual(str(Card("J", "hearts")), "Jack of hearts")
        self.assertEqual(str(Card("Q", "hearts")), "Queen of hearts")
        self.assertEqual(str(Card("K", "hearts")), "King of hearts")
        self.assertEqual(str(Card("A", "hearts")), "Ace of hearts")

    def test_pip_cards_print_their_number(self):
        self.assertEqual(str(Card("7", "clubs")), "7 of clubs")
"""

CARDS_3 = TicketSpec(
    id="CARDS-3",
    title="Face cards print as letters",
    body="""\
`str(Card("K", "hearts"))` prints `K of hearts`; the table app shows that to players.
Face cards and aces should print their names: Jack, Queen, King, Ace.

Expected: `Jack of hearts`, `Queen of hearts`, `King of hearts`, `Ace of hearts`;
pip cards unchanged (`7 of clubs`). Fix first, then add the tests.
""",
    commits=(
        # The change is in the right order but incomplete (kings and aces are missed),
        # so the project's own tests fail: a failure no playbook entry knows.
        CommitSpec(
            message="Print face cards by name\n",
            files={
                "cards/deck.py": replace_once(
                    DECK_PY,
                    '        return f"{self.rank} of {self.suit}"\n',
                    '        names = {"J": "Jack", "Q": "Queen"}\n'
                    '        return f"{names.get(self.rank, self.rank)} of {self.suit}"\n',
                ),
            },
        ),
        CommitSpec(
            message="Add tests for card names\n",
            files={"tests/test_deck.py": TEST_DECK_PY + FACE_NAMES_TESTS},
        ),
    ),
)

TICKETS: tuple[TicketSpec, ...] = (CARDS_1, CARDS_2, CARDS_3)
