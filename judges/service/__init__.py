"""The judge as an HTTP service: `app` (routes and `main()`), `auth` (the bearer token),
`connections` (listening, descriptor budget, error middleware), `requests` (reading bounded
request bodies), `engine` and `slots` (the bounded queue, dispatchers and worker slots),
`setup` (the verdict cache's and the Ray workers' flags and set-up), `sources` (the problems the
flags name), `process` (starting the service as a subprocess)."""
