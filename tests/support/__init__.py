"""What the test tiers share: servers, harnesses and helpers (fixtures stay in tests/conftest.py)."""
