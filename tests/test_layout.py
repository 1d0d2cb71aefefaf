"""The test tree itself: pytest's default import mode needs every test module's basename to be
unique across folders (two `test_judge.py` stopped CI's collection twice)."""

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_test_module_basenames_are_unique():
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert not [name for name, count in names.items() if count > 1]
