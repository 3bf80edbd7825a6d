"""The action classes of request and tool-name words (docs/backends.md, "Action agreement")."""

from __future__ import annotations

import pytest

from toolsearch.actions import ACTION_CLASSES, action_classes, word_forms


@pytest.mark.parametrize(
    ("words", "classes"),
    [
        (["create"], {"create"}),
        (["created"], {"create"}),
        (["creating"], {"create"}),
        (["updates"], {"update"}),
        (["replies"], {"send", "respond"}),
        (["stopped"], {"stop"}),
        (["running"], {"run"}),
        (["posting"], {"create", "send"}),  # two senses: both classes
        (["publish"], {"create", "run"}),
        (["delete", "project"], {"delete"}),
        (["project", "status"], set()),
        ([], set()),
    ],
)
def test_words_map_to_their_classes_through_regular_inflections(
    words: list[str], classes: set[str]
) -> None:
    assert action_classes(words) == classes


def test_a_word_takes_its_most_literal_known_form() -> None:
    # "posts" is the verb "post", never a stem like "pos"
    assert word_forms("posts")[:2] == ["posts", "post"]
    assert action_classes(["news"]) == set()  # not "new": only the whole word's forms count
    assert action_classes(["sets"]) == {"update"}


def test_every_class_has_verbs_and_every_verb_is_one_lower_case_word() -> None:
    assert set(ACTION_CLASSES) == {
        "read",
        "create",
        "update",
        "delete",
        "send",
        "run",
        "stop",
        "respond",
    }
    for verbs in ACTION_CLASSES.values():
        assert verbs and all(v.isalpha() and v.islower() for v in verbs)
