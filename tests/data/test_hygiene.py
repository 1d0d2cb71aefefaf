from cascade_rl.data.hygiene import decontaminate, dedup, words


def test_nine_gram_overlap_is_dropped_and_eight_gram_is_not():
    test = ["the quick brown fox jumps over the lazy dog near the river bank"]
    nine = {"text": "Intro: The quick brown fox, jumps over the lazy dog near! something else"}
    eight = {"text": "the quick brown fox jumps over the lazy cat"}
    kept, dropped = decontaminate([nine, eight], test, lambda r: r["text"], n=9)
    assert kept == [eight] and dropped == 1


def test_dedup_keeps_first_exact_prompt_ignoring_whitespace():
    rows = [{"p": "a  b"}, {"p": "a b"}, {"p": "a c"}]
    kept, dropped = dedup(rows, key=lambda r: r["p"])
    assert kept == [{"p": "a  b"}, {"p": "a c"}] and dropped == 1


def test_words_lowercase_and_strip_punctuation():
    assert words("Hello, World! 42x") == ["hello", "world", "42x"]
