"""From a submission to a verdict: `judging` (compile, run, the result records), `cases` (one
case end to end), `programs` (checker and interactor programs, compiled once), `store`
(results on disk, surviving restarts; `nofollow`: opening nothing through a link), `cache` and
`fingerprints` (identical submissions answered from stored verdicts)."""
