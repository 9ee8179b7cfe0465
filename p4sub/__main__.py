import sys

from p4sub import main

sys.exit(main())
