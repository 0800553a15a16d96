import sys

from otel_tracefence.cli import main

sys.exit(main())
