from pathlib import Path

# Real published nccl-tests outputs (source_url per file in expected.json), kept in the
# repository so a clone runs the same tests; a missing file fails a test, it never skips one.
FIXTURES = Path(__file__).resolve().parent / "fixtures"
