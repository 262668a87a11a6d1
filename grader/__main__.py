import sys

from grader.grade import main

sys.exit(main())
