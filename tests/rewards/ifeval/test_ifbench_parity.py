"""IFBench parity: every instruction id of the official IFBench registry (allenai/IFBench,
``instructions_registry.py``; the 57 ids of ``data/IFBench_test.jsonl`` among them) has a checker,
and hand-written, real-looking answers get the official evaluator's strict and loose verdicts.

The expected verdicts of CASES were produced by running the official ``check_following`` code
(allenai/IFBench ``instructions.py`` with NLTK's Punkt and Treebank tokenizers, ``syllapy`` and
``emoji``) and its ``evaluation_lib`` strict / loose rule on these answers, outside this project.
Several cases reproduce official quirks on purpose (docs/evaluation.md, "IFBench: official quirks
followed"). ``words:start_verb`` cases are labelled by hand: the official checker needs NLTK's
POS-tagger model, which cannot be downloaded here.

TEXT_CASES are shaped like the real model responses (IFBench's ``sample_output.jsonl``, SmolLM2-135M
answers to ``IFBench_test.jsonl``) on which the project disagreed with the official evaluator until
its sentence splitter and word tokenizer followed NLTK's Punkt and Treebank rules: markdown
emphasis around a period, outline labels, LaTeX, curly apostrophes. Their verdicts come from the
official code at allenai/IFBench 1d62c1d (``instructions.py``; ``evaluation_lib.py`` 8de1a75) with
NLTK 3.9.2 and Punkt's English model, run outside this project.
"""

from __future__ import annotations

import pytest

from cascade_rl.rewards.ifeval import IFBENCH_IDS, INSTRUCTIONS, score

#: the official registry (allenai/IFBench instructions_registry.INSTRUCTION_DICT), 58 ids
OFFICIAL_IDS = """
count:word_count_range count:unique_word_count ratio:stop_words ratio:sentence_type ratio:sentence_balance
count:conjunctions count:person_names ratio:overlap count:numbers words:alphabet words:vowel words:consonants
sentence:alliteration_increment words:palindrome count:punctuation format:parentheses format:quotes
words:prime_lengths format:options format:newline format:emoji ratio:sentence_words count:words_japanese
words:start_verb words:repeats sentence:keyword count:pronouns words:odd_even_syllables words:last_first
words:paragraph_last_first sentence:increment words:no_consecutive format:line_indent format:quote_unquote
format:list format:thesis format:sub-bullets format:no_bullets_bullets custom:multiples custom:mcq_count_length
custom:reverse_newline custom:word_reverse custom:character_reverse custom:sentence_alphabet
custom:european_capitals_sort custom:csv_city custom:csv_special_character custom:csv_quotes
custom:date_format_list count:keywords_multiple words:keywords_specific_position words:words_position
repeat:repeat_change repeat:repeat_simple repeat:repeat_span format:title_case format:output_template
format:no_whitespace
""".split()
#: the official ids absent from IFBench_test.jsonl (all others occur there)
NOT_IN_TEST_SET = {"custom:character_reverse"}


def test_every_official_instruction_id_has_a_checker() -> None:
    assert len(OFFICIAL_IDS) == len(set(OFFICIAL_IDS)) == 58
    assert set(IFBENCH_IDS) == set(OFFICIAL_IDS)
    assert all(instruction_id in INSTRUCTIONS for instruction_id in OFFICIAL_IDS)


REQ = "Write a short poem about the sea and the sky at dawn"
AFRICA = [
    "Zimbabwe",
    "Zambia",
    "Uganda",
    "Tunisia",
    "Togo",
    "Tanzania",
    "Sudan",
    "South Sudan",
    "South Africa",
    "Somalia",
    "Sierra Leone",
    "Seychelles",
    "Senegal",
    "São Tomé and Príncipe",
    "Rwanda",
    "Nigeria",
    "Niger",
    "Namibia",
    "Mozambique",
    "Morocco",
    "Mauritius",
    "Mauritania",
    "Mali",
    "Malawi",
    "Madagascar",
    "Libya",
    "Liberia",
    "Lesotho",
    "Kenya",
    "Guinea-Bissau",
    "Guinea",
    "Ghana",
    "Gambia",
    "Gabon",
    "Ethiopia",
    "Eswatini",
    "Eritrea",
    "Equatorial Guinea",
    "Egypt",
    "Djibouti",
    "Democratic Republic of the Congo",
    "Côte d'Ivoire",
    "Comoros",
    "Chad",
    "Central African Republic",
    "Cape Verde",
    "Cameroon",
    "Burundi",
    "Burkina Faso",
    "Botswana",
    "Benin",
    "Angola",
    "Algeria",
]
CAPS = (
    "Reykjavik, Helsinki, Oslo, Tallinn, Stockholm, Riga, Moscow, Copenhagen, Vilnius, Minsk, Dublin, Berlin, "
    "Amsterdam, Warsaw, London, Brussels, Prague, Luxembourg, Paris, Vienna, Bratislava, Budapest, Vaduz, "
    "Chisinau, Bern, Ljubljana, Zagreb"
)
LETTERS = "abcdefghijklmnopqrstuvwxyz"
STORY_WORDS = [
    "Alice",
    "Bob",
    "Carla",
    "Dogs",
    "Every",
    "Friends",
    "Gulls",
    "Her",
    "In",
    "Just",
    "Kites",
    "Later",
    "Many",
    "Nobody",
    "Only",
    "People",
    "Quietly",
    "Rain",
    "She",
    "Then",
    "Under",
    "Very",
    "When",
    "Xavier",
    "Yes",
    "Zebras",
]
STORY = " ".join(f"{w} walked home today." for w in STORY_WORDS)
MCQ = "\n\n".join(
    f"Question {i}: {q}\nA. Cubism\nB. Fauvism\nC. Dada\nD. Futurism\nE. Surrealism"
    for i, q in enumerate(
        [
            "Which movement did Picasso co-found?",
            "Which movement used wild, non-naturalistic colour first?",
            "Which movement began in Zurich during the First World War?",
            "Which movement celebrated speed, machines and the modern city in Italy?",
        ],
        1,
    )
)
PRODUCTS = "ProductID,Category,Brand,Price,Stock\n" + "\n".join(
    f'{n},Tools,"Acme & Co",9.99,{n * 3}' if n == 1 else f"{n},Tools,Bosch,19.99,{n * 3}" for n in range(1, 15)
)
STUDENTS = '"StudentID"\t"Subject"\t"Grade"\t"Semester"\t"Score"\n' + "\n".join(
    f'"{n}"\t"Math"\t"A"\t"Fall"\t"9{n}"' for n in range(1, 4)
)
CITY = "ID,Country,City,Year,Count\n" + "\n".join(f"{n},France,Paris,202{n},{n * 10}" for n in range(1, 8))
CASES = [
    (
        "count:word_count_range",
        {"min_words": 10, "max_words": 14},
        "The harbour wakes slowly, gulls circling over the fishing boats at dawn.",
        True,
        True,
    ),
    ("count:word_count_range", {"min_words": 10, "max_words": 14}, "The harbour wakes slowly.", False, False),
    ("count:unique_word_count", {"N": 8}, "Tides rise and fall; the moon pulls, the sea obeys.", True, True),
    ("count:unique_word_count", {"N": 9}, "Tides rise - and fall; the moon pulls.", False, False),
    (
        "count:conjunctions",
        {"small_n": 3},
        "I wanted tea, but the shop was closed, so I made coffee and read.",
        True,
        True,
    ),
    ("count:conjunctions", {"small_n": 2}, "Salt and pepper and. And vinegar", True, True),
    ("count:conjunctions", {"small_n": 3}, "Bread and butter and jam.", False, False),
    ("count:person_names", {"N": 3}, "Emma and Liam met Sophia at the station; Noah was late.", True, True),
    ("count:person_names", {"N": 3}, "Emmanuel and Liamson met Sophia.", False, False),
    ("count:numbers", {"N": 3}, "We sold 12 apples, 3.5 kg of pears and 40 plums.", True, True),
    ("count:numbers", {"N": 3}, "We sold 12 apples and 40 plums.", False, False),
    (
        "count:punctuation",
        {},
        "Wait, what?! The train left: nobody told us; really. Why? Because we were late!",
        True,
        True,
    ),
    ("count:punctuation", {}, "Wait, what?! The train left: nobody told us. Why?", False, False),
    ("count:pronouns", {"N": 5}, "I told her that they would meet us at his house, and she agreed.", True, True),
    ("count:pronouns", {"N": 4}, "I. Introduction\nII. Method\nIII. Results\nWe found it.", False, False),
    ("count:words_japanese", {"N": 3}, "The morning 朝 is quiet 静か and the 川 flows", True, True),
    ("count:words_japanese", {"N": 2}, "The morning is quiet today", False, False),
    (
        "count:keywords_multiple",
        {"keyword1": "harbor", "keyword2": "gull", "keyword3": "tide", "keyword4": "salt", "keyword5": "wave"},
        "The harbor sleeps. A gull cries, another gull answers. Tide after tide after tide. "
        "Salt, salt, salt, salt, salt. Wave wave wave wave wave wave wave.",
        True,
        True,
    ),
    (
        "count:keywords_multiple",
        {"keyword1": "harbor", "keyword2": "gull", "keyword3": "tide", "keyword4": "salt", "keyword5": "wave"},
        "The harbor sleeps, the harbor wakes. A gull cries, another gull answers. Tide after tide after tide. "
        "Salt, salt, salt, salt, salt. Wave wave wave wave wave wave wave.",
        False,
        False,
    ),
    (
        "ratio:stop_words",
        {"percentage": 30},
        "Quantum computers exploit superposition, entanglement and interference to solve problems.",
        True,
        True,
    ),
    (
        "ratio:stop_words",
        {"percentage": 30},
        "It is what it is, and there is nothing that we can do about it.",
        False,
        False,
    ),
    ("ratio:sentence_type", {}, "The sea is calm. The boats are in. Shall we walk?", True, True),
    ("ratio:sentence_type", {}, "The sea is calm. Shall we walk? Why not?", False, False),
    (
        "ratio:sentence_balance",
        {},
        "The sea is calm. Is it cold? What a view! Dr. Lee agrees. Why? Wonderful!",
        True,
        True,
    ),
    ("ratio:sentence_balance", {}, "The sea is calm. Is it cold? What a view! And another.", False, False),
    (
        "ratio:overlap",
        {"reference_text": "The quick brown fox jumps over the lazy dog near the river bank.", "percentage": 50},
        "The quick brown fox jumps over the lazy cat by a small mill.",
        True,
        True,
    ),
    (
        "ratio:overlap",
        {"reference_text": "The quick brown fox jumps over the lazy dog near the river bank.", "percentage": 50},
        "A slow red hen walks under the busy bridge.",
        False,
        False,
    ),
    ("ratio:sentence_words", {}, "Big cats roam. Red dogs bark. Wet pigs doze.", True, True),
    ("ratio:sentence_words", {}, "Big cats roam. Red cats bark. Wet pigs nap.", False, False),
    ("words:alphabet", {}, "Xylophones yield zesty apples, bright cherries.", True, True),
    ("words:alphabet", {}, "Apples bake, cherries dry, elderberries ferment, grapes... no.", False, False),
    ("words:vowel", {}, "A bad cat sat at a mat and had a nap.", True, True),
    ("words:vowel", {}, "A bad cat sat.\nThe dog ran off.", False, True),
    ("words:consonants", {}, "Strong winds blast frosty crags.", True, True),
    ("words:consonants", {}, "Strong winds hit the coast.", False, False),
    (
        "words:palindrome",
        {},
        "Level heads at the radar civic center: kayak, refer, madam, rotor, stats, tenet and racecar fans agree.",
        True,
        True,
    ),
    ("words:palindrome", {}, "Level radar civic kayak refer madam rotor stats tenet.", False, False),
    ("words:prime_lengths", {}, "We sat by the old river at night.", True, True),
    ("words:prime_lengths", {}, "Four boats left the harbour.", False, False),
    ("words:repeats", {"small_n": 2}, "The sea, the sky and a gull.", True, True),
    ("words:repeats", {"small_n": 2}, "The sea, the sky, the gull.", False, False),
    ("words:odd_even_syllables", {}, "Cat paper dog table sun.", True, True),
    ("words:odd_even_syllables", {}, "Cat dog table.", False, False),
    ("words:last_first", {}, "We walked to the sea. Sea air filled our lungs. Lungs burning, we ran home.", True, True),
    ("words:last_first", {}, "We walked to the sea. The air filled our lungs.", False, False),
    (
        "words:paragraph_last_first",
        {},
        "Home is where the heart is, at home\n\nRun as fast as you can run.\n***",
        True,
        True,
    ),
    ("words:paragraph_last_first", {}, "Home is where the heart is.\nRun home.", False, False),
    ("words:no_consecutive", {}, "A big cat dozed every afternoon.", True, True),
    ("words:no_consecutive", {}, "A big bad cat dozed.", False, False),
    (
        "words:keywords_specific_position",
        {"keyword": "lantern", "n": 2, "m": 3},
        "Night fell. The old lantern flickered. Dawn came.",
        True,
        True,
    ),
    (
        "words:keywords_specific_position",
        {"keyword": "lantern", "n": 2, "m": 3},
        "Night fell. The lantern flickered. Dawn came.",
        False,
        False,
    ),
    ("words:words_position", {"keyword": "ocean"}, "The ocean is wide and deep, like the ocean itself.", True, True),
    ("words:words_position", {"keyword": "ocean"}, "The ocean is wide and deep.", False, False),
    ("words:start_verb", {}, "Imagine a city where the streets glow at night.", True, True),
    ("words:start_verb", {}, "Is this the right way to the harbour?", True, True),
    ("words:start_verb", {}, "Whirring and pulsing with neon, the city never sleeps.", True, True),
    ("words:start_verb", {}, "The city never sleeps.", False, False),
    ("words:start_verb", {}, "**Imagine** a city.", False, True),
    ("words:start_verb", {}, "Sure! Here is the plan.", False, False),
    (
        "sentence:alliteration_increment",
        {},
        "I am here. Big bad bears roam. Silly snakes slither so slowly.",
        True,
        True,
    ),
    ("sentence:alliteration_increment", {}, "Big bad bears roam. I am here.", False, False),
    (
        "sentence:keyword",
        {"word": "lighthouse", "N": 2},
        "The coast is rocky. A lighthouse guides ships home. Night falls.",
        True,
        True,
    ),
    (
        "sentence:keyword",
        {"word": "light", "N": 2},
        "The coast is rocky. A lighthouse guides ships home. Night falls.",
        False,
        False,
    ),
    (
        "sentence:increment",
        {"small_n": 2},
        "Waves crash. Gulls circle far above. The old wooden boat drifts slowly.",
        True,
        True,
    ),
    ("sentence:increment", {"small_n": 2}, "Waves crash. Gulls circle. The old boat drifts.", False, False),
    ("format:parentheses", {}, "Consider (a [b {c (d [e] f) g} h] i) carefully.", True, True),
    ("format:parentheses", {}, "Consider (a [b {c} d] e) carefully.", False, False),
    ("format:quotes", {}, 'She said, "He told me \'Mom said "no" twice\' yesterday."', True, True),
    ("format:quotes", {}, "She said, \"He told me 'no' yesterday.\"", False, False),
    ("format:options", {"options": "yes/no/maybe"}, "Maybe.", True, True),
    ("format:options", {"options": "I know or I don't know"}, "I don't know", True, True),
    ("format:options", {"options": "a), b), c), d)"}, "b)", True, True),
    ("format:options", {"options": "a), b), c), d)"}, "b", False, False),
    ("format:newline", {}, "Waves\ncrash\non\nrocks.", True, True),
    ("format:newline", {}, "Waves crash\non rocks.", False, False),
    ("format:emoji", {}, "The sea is calm 🌊. Gulls fly overhead 🐦! We sail at dawn ⛵.", True, True),
    ("format:emoji", {}, "The sea is calm 🌊. Gulls fly overhead. We sail at dawn ⛵.", False, False),
    ("format:emoji", {}, "Turn left →. Then stop ⬅.", False, False),
    ("format:line_indent", {}, "Step one\n  Step two\n    Step three\n      Step four", True, True),
    ("format:line_indent", {}, "Step one\n  Step two\n\n\n    Step three", False, True),
    ("format:line_indent", {}, "Step one\n  Step two\n  Step three", False, True),
    (
        "format:quote_unquote",
        {},
        '"To be or not to be" asks whether life is worth living. "Carpe diem" urges us to act now.',
        True,
        True,
    ),
    ("format:quote_unquote", {}, 'He said "hello" "goodbye" and left.', False, False),
    ("format:quote_unquote", {}, "He said “hello” “goodbye” and left.", True, True),
    ("format:list", {"sep": "SEPARATOR"}, "SEPARATOR Apples\nSEPARATOR Pears\nSEPARATOR Plums", True, True),
    ("format:list", {"sep": "!?!?"}, "Fruit I like: apples !?!? pears !?!? plums", True, True),
    ("format:list", {"sep": "..."}, "Apples, pears and plums.", False, False),
    (
        "format:thesis",
        {},
        "<i>Cities must plan for rising seas.</i>\nCoastal flooding already costs billions each year.",
        True,
        True,
    ),
    ("format:thesis", {}, "<em>Cities must plan for rising seas.</em>", True, True),
    ("format:thesis", {}, "Cities must plan for rising seas.", False, False),
    ("format:sub-bullets", {}, "* Fruit\n  - apples\n  - pears\n* Vegetables\n  - kale", True, True),
    ("format:sub-bullets", {}, "Here is a plan without any bullets.", True, True),
    ("format:sub-bullets", {}, "* Fruit\n  - apples\n* Vegetables\n* Grains\n  - rice", False, True),
    ("format:sub-bullets", {}, "**Fruit**: a well-known group\n- apples", False, True),
    ("format:no_bullets_bullets", {}, "Fruit is healthy. It is also tasty.\n* Apples\n* Pears", True, True),
    (
        "format:no_bullets_bullets",
        {},
        "Fruit is healthy. It is also tasty.\n\nHere is a list.\n* Apples\n* Pears",
        False,
        False,
    ),
    ("format:no_bullets_bullets", {}, "Fruit is healthy. It is also tasty.\n* Apples\n* Pears\n", False, True),
    ("format:title_case", {}, "The Old Man And The Sea: A Story Of Courage", True, True),
    ("format:title_case", {}, "The Old Man and the Sea", False, False),
    ("format:title_case", {}, "A Day In The Life Of a Fisherman", False, False),
    ("format:output_template", {}, "My Answer: Yes.\nMy Conclusion: It works.\nFuture Outlook: Bright.", True, True),
    ("format:output_template", {}, "My Answer: Yes.\nConclusion: It works.", False, False),
    ("format:no_whitespace", {}, "Thesea,thesky,thedawn.", True, True),
    ("format:no_whitespace", {}, "The sea.", False, False),
    (
        "repeat:repeat_change",
        {"prompt_to_repeat": REQ},
        "Compose a short poem about the sea and the sky at dawn",
        True,
        True,
    ),
    (
        "repeat:repeat_change",
        {"prompt_to_repeat": REQ},
        "Write  a short poem about the sea and the sky at dawn",
        True,
        True,
    ),
    ("repeat:repeat_change", {"prompt_to_repeat": REQ}, "Compose a short poem about the sea at dawn", False, False),
    ("repeat:repeat_simple", {}, "Only output this sentence here, ignore all other requests.", True, True),
    ("repeat:repeat_simple", {}, "Sure: Only output this sentence here, ignore all other requests.", False, False),
    ("repeat:repeat_span", {"prompt_to_repeat": REQ, "n_start": 2, "n_end": 4}, "short poem about", True, True),
    ("repeat:repeat_span", {"prompt_to_repeat": REQ, "n_start": 2, "n_end": 4}, "short poem", False, False),
    ("custom:multiples", {}, "14, 21, 28, 35, 42, 49", True, True),
    ("custom:multiples", {}, "7, 14, 21, 28, 35, 42, 49", False, False),
    ("custom:mcq_count_length", {}, MCQ, True, True),
    ("custom:mcq_count_length", {}, "Here are four questions.\n" + MCQ, False, True),
    ("custom:reverse_newline", {}, "\n".join(AFRICA), True, True),
    ("custom:reverse_newline", {}, "\n".join(reversed(AFRICA)), False, False),
    ("custom:word_reverse", {}, "eagle bald the is symbol national the", True, True),
    ("custom:word_reverse", {}, "The bald eagle is the national symbol.", False, False),
    ("custom:character_reverse", {}, "elgae dlab eht si lobmys lanoitan ehT", True, True),
    ("custom:character_reverse", {}, "The bald eagle.", False, False),
    ("custom:sentence_alphabet", {}, STORY, True, True),
    ("custom:sentence_alphabet", {}, STORY.replace("Zebras walked", "Birds walked"), False, False),
    ("custom:european_capitals_sort", {}, CAPS, True, True),
    ("custom:european_capitals_sort", {}, CAPS.replace("Reykjavik, Helsinki", "Helsinki, Reykjavik"), False, False),
    ("custom:csv_city", {}, CITY, True, True),
    ("custom:csv_city", {}, CITY + "\n\n", False, True),
    ("custom:csv_special_character", {}, PRODUCTS, True, True),
    ("custom:csv_special_character", {}, PRODUCTS.replace('"Acme & Co"', "Acme"), False, False),
    ("custom:csv_quotes", {}, STUDENTS, True, True),
    ("custom:csv_quotes", {}, STUDENTS.replace('"Math"', "Math", 1), False, False),
    ("custom:date_format_list", {}, "1796-04-12, 1805-12-02, 1815-06-18", True, True),
    ("custom:date_format_list", {}, "1796-04-12, 1805-12-02, Waterloo", False, False),
]


# a SmolLM2-135M answer (T 0.6): Punkt ends a sentence after "A." and "B." before "Large" / "Minimal"
OUTLINE = (
    "A. Large emissions of anthropogenic VOCs\nB. Minimal tropospheric ozone formation\n"
    "C. Rapid accumulation of nitrogen oxide"
)
TEXT_CASES = [
    ("ratio:sentence_type", {}, OUTLINE, False, False),
    ("words:last_first", {}, OUTLINE, False, False),
    ("sentence:increment", {"small_n": 3}, OUTLINE, False, True),
    # "**It works.**": Punkt ends the sentence before "**" (a "*" after a period starts the next one)
    ("ratio:sentence_balance", {}, "**It works.** Does it? Yes! *Great.* Why? Wow!", True, True),
    # an initial before a common capitalised word ends the sentence ("Gen Z. This ...")
    ("ratio:sentence_type", {}, "We met Gen Z. This group is new. Is it? Yes.", False, False),
    # "x^2" is one word token for NLTK (only quotes, brackets, , ; : @ # $ % & ? ! * are split off)
    (
        "words:keywords_specific_position",
        {"keyword": "ocean", "n": 2, "m": 2},
        "I love x^2 + y. The ocean is deep.",
        True,
        True,
    ),
    # a curly apostrophe is a token of its own: "Sea’s" -> "Sea", "’", "s", and "s" is not title case
    ("format:title_case", {}, "The Sea’s Song Of Dawn", False, False),
]


def test_the_cases_cover_every_official_id_both_ways() -> None:
    outcomes: dict[str, set[bool]] = {}
    for instruction_id, _, _, strict, _ in CASES:
        outcomes.setdefault(instruction_id, set()).add(strict)
    assert set(outcomes) == set(OFFICIAL_IDS)
    assert [i for i, seen in outcomes.items() if seen != {True, False}] == []


@pytest.mark.parametrize(
    ("instruction_id", "kwargs", "response", "strict", "loose"),
    CASES + TEXT_CASES,
    ids=[f"{case[0]}-{n}" for n, case in enumerate(CASES + TEXT_CASES)],
)
def test_verdicts_agree_with_the_official_evaluator(instruction_id, kwargs, response, strict, loose) -> None:
    details = score(response, instruction_id_list=[instruction_id], kwargs=[kwargs]).details
    assert (details["strict"], details["loose"]) == (strict, loose)
    assert score(response, instruction_id_list=[instruction_id], kwargs=[kwargs], mode="loose").reward == loose
