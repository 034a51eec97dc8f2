"""`python -m email_outbox.cli`: the `email-outbox` command without its console script."""

import sys

from email_outbox.cli.main import main

sys.exit(main())
