"""Problem packages and their checkers: `package` (FrontierCS packages: config, cases, limits),
`checkers` (built-in checkers as pure functions), `testlib` (testlib's reading rules), and
`polyomino/` (piece enumeration, the checker, the seeded instance generator). Packages of every
kind are loaded through `judges.kinds`."""
