"""What a request asks to do and what a tool does: coarse action classes of their words.

Many retrieval misses are the right server's wrong verb: "post a project status update" ranks
``get_project_status`` above ``create_project_status``, "leave a comment on the page"
``retrieve-a-comment`` above ``create-a-comment``. A dense model trained on a catalogue learns its
verbs; on a catalogue it never saw, the verb is one word among many and the nouns decide. So the
hybrid's convex fusion gives ``action_bonus`` to a tool with a server whose name shares an
action class with the request (:mod:`toolsearch.fusion`; docs/backends.md).

The classes (:data:`ACTION_CLASSES`) are the operations of REST and RPC APIs — read, create,
update, delete — plus sending messages, running and stopping jobs and answering requests, each
with its common English verbs. A word with two senses belongs to both ("post": create and send;
"publish": create and run), so agreement is a shared class, never an exact verb. Words are
matched with their regular inflections ("posting", "created", "updates", "deleting"), except
the adjective "new", matched as written. A few suffix rules, not a stemmer: the fusion is part
of the core package, which needs no extra (the ``postgres`` backend fuses without PyStemmer).
Nothing here is learned from a dataset: the list holds verbs any API uses, so it carries to
catalogues it was never measured on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["ACTION_CLASSES", "UNINFLECTED", "action_classes", "word_forms"]

#: Action classes and their verbs; a verb may be in several (see the module docstring).
ACTION_CLASSES: Mapping[str, frozenset[str]] = {
    name: frozenset(verbs.split())
    for name, verbs in {
        "read": "get fetch retrieve read show view display describe see look check inspect "
        "list browse enumerate search find query lookup count download",
        "create": "create add new make insert post publish submit register open start book "
        "reserve schedule upload write compose draft generate build leave invite",
        "update": "update edit modify change set rename patch replace move assign adjust "
        "configure toggle enable disable mark close reopen archive",
        "delete": "delete remove drop destroy erase trash purge clear unsubscribe uninstall revoke",
        "send": "send post message notify email reply forward share dm tell text ping announce "
        "broadcast mail",
        "run": "run execute trigger invoke launch deploy start restart rerun build publish",
        "stop": "stop cancel abort kill terminate halt pause suspend end",
        "respond": "respond reply answer accept decline rsvp approve reject confirm",
    }.items()
}

#: Verbs matched only as written: "news" is not "new".
UNINFLECTED: frozenset[str] = frozenset({"new"})

_CLASSES_OF: dict[str, frozenset[str]] = {}
for _name, _verbs in ACTION_CLASSES.items():
    for _verb in _verbs:
        _CLASSES_OF[_verb] = _CLASSES_OF.get(_verb, frozenset()) | {_name}


def word_forms(word: str) -> list[str]:
    """``word`` and the stems its regular inflections may come from, most literal first (so
    ``replies`` may be reply, ``updates`` update, ``created`` create, ``stopped`` stop,
    ``posting`` post and ``running`` run)."""
    forms = [word]
    if word.endswith("ies"):
        forms.append(word[:-3] + "y")
    if word.endswith("es"):
        forms.append(word[:-2])
    if word.endswith("s"):
        forms.append(word[:-1])
    if word.endswith("ed"):
        doubled = len(word) > 4 and word[-3] == word[-4]
        forms += [word[:-2], word[:-1], word[:-3] if doubled else word[:-2]]
    if word.endswith("ing"):
        doubled = len(word) > 5 and word[-4] == word[-5]
        forms += [word[:-3], word[:-3] + "e", word[:-4] if doubled else word[:-3]]
    return forms


def action_classes(words: Iterable[str]) -> frozenset[str]:
    """The action classes of lower-cased ``words`` (each word by its first form that is a
    known verb, :func:`word_forms`, those of :data:`UNINFLECTED` only as written); empty when
    none is."""
    found: frozenset[str] = frozenset()
    for word in words:
        for form in word_forms(word):
            classes = _CLASSES_OF.get(form)
            if classes is not None and (form == word or form not in UNINFLECTED):
                found |= classes
                break
    return found
