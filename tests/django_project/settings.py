"""The settings of the test Django project: the database comes from the environment the test sets."""

from __future__ import annotations

import os

if os.environ["EO_DJANGO_DRIVER"] == "pymysql":
    import pymysql

    pymysql.install_as_MySQLdb()

SECRET_KEY = "a-test-project-key-not-a-secret"
USE_TZ = True
INSTALLED_APPS = ["tests.django_project.shop"]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": os.environ["EO_DJANGO_NAME"],
        "USER": os.environ["EO_DJANGO_USER"],
        "PASSWORD": os.environ.get("EO_DJANGO_PASSWORD", ""),
        "HOST": os.environ["EO_DJANGO_HOST"],
        "PORT": os.environ.get("EO_DJANGO_PORT", ""),
        # utf8mb4, not Django's default utf8 (3 bytes): a message's emoji must reach the procedure whole.
        "OPTIONS": {"charset": "utf8mb4"},
    }
}
EMAIL_BACKEND = "email_outbox.django.EmailBackend"
DEFAULT_FROM_EMAIL = "Shop <shop@example.com>"
