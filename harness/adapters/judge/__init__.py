"""The judge: the FrontierCS HTTP client (`frontiercs`), verdict hardening (`verdict`), the judge
suites (`suites`) and the judge's token (`token`)."""
