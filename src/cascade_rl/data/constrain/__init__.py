"""IF-RL rows from real texts (SPEC section 6, IF-RL): ``cascade data constrain``.

IF-RL trains on prompts that carry verifiable constraints (the IFEval taxonomy, then the IFBench
training taxonomy). This package turns any text -- a GSM8K or MBPP training question, an RL
``prompt`` -- into such a row: the text, then one to a few constraints, each described with the
registry's own wording (:func:`cascade_rl.rewards.ifeval.build_description`), so the wording
the model reads and the checker that scores it are one declaration. Rows are ``ifeval``-domain
RL rows (docs/data-formats.md) with IFEval's ``instruction_id_list`` / ``kwargs``, plus
``base_text`` (the text the constraints were added to; decontaminate on it, see below) and
``base_id`` (where it came from).

**Drawing.** Each row's random generator is seeded with ``(seed, base text)``, so a row's
constraints do not depend on the other rows, ``--limit``, a resumed run or where the file lies. The number of
constraints is drawn in ``lo..hi`` with weights halving at each step (1-3: 57% / 29% / 14%,
IFEval's test set has 56% / 33% / 11%); instructions are drawn by weight (:data:`~.draws.SPECS`) among
those compatible with the ones already chosen; kwargs come from ranges close to IFEval's but
smaller where a small model could not follow (e.g. word limits 30-250, not up to 1,200), and
keywords come from the base text's own content words or from :data:`~.vocabulary.WORDS` -- never from
IFEval's prompts.

**Conflicts** (:func:`~.draws.compatible`). Two instructions are never drawn together when

* they are in one :data:`~.draws.CONFLICT_GROUPS` group (they claim the same property of the answer:
  its case or language, its paragraph layout, its length, one letter's count, its last words),
* they are one of the :data:`~.draws.CONFLICT_PAIRS` (a response in another language cannot contain
  English keywords; a first word cannot be a ``<<title>>``; ...), or
* one of them takes only a short list of companions (``only_with``): instructions that dictate
  the whole shape of the answer (JSON, two responses, repeating the request, copying, hyphen-
  joined sentences, ...) combine only with word-level constraints that cannot break that shape,
  or with none.

Then a row is kept only with a **witness**: :func:`~.witness.satisfying_response` constructs an answer
that follows every drawn instruction and the registry's scorer must give it 1.0 (this catches
what a static table cannot: a ``less than 40 words`` limit with a request to repeat a 60-word
question, an end phrase with a dot under "no dots"). A combination without a witness is drawn
again (kwargs first, then the instructions); the summary counts these redraws per instruction.
So no row is unsatisfiable by construction.

**Decontamination.** The descriptions are IFEval's templates, and IFEval's test prompts often
quote them word for word ("Your entire response should be in English, and in all lowercase
letters..."): a 9-gram check of the whole prompt flags rows for sharing the template, not a
test instance. Decontaminate IF rows on their request: ``cascade data decontaminate OUT.jsonl
-b ifeval=input_data.jsonl --text base_text`` (docs/data-formats.md has the measured figures).

**Modules.** :mod:`.vocabulary` (the instruction ids and the word lists kwargs and answers are
made of), :mod:`.draws` (the instruction table :data:`~.draws.SPECS`, its conflict rules and the
draw of a row), :mod:`.witness` (the constructed answer that proves a combination can be
followed) and :mod:`.files` (the file job of ``cascade data constrain`` and the ``constrain``
converter). An instruction's entries in the table, the conflict rules and the witness must
agree: ``tests/data/test_constrain.py`` checks the whole table at once.
"""

from __future__ import annotations
