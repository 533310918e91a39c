"""`memory-agent ...`: the argument tree and dispatch (`main`), and thin command shells over
library calls (`entries`, `home`, `evaluate`, `shells`). Printing and exit codes live here only."""
