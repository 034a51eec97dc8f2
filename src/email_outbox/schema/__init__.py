"""The schema: yoyo migrations and procedures/ installed under one lock, drift checks, and the
least-privilege roles."""
