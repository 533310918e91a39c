"""Intake: the rules every text taken in from outside follows, whether a hook captured it, an
import read it or a person wrote it - secrets redacted (`intake.redact`), the project it
belongs to (`intake.projects`), and the journal captured turns are kept in (`intake.journal`).
Below capture, the KB and the write path alike, so each uses the one rule without reaching
across (docs/adr/0018-packages-by-job.md). Standard library only: the hook command loads it.

Kept free of imports (docs/adr/0013-layout-by-job.md): the hook command imports this package,
and must load the standard library only."""
