"""Remote machines: `settings.json` (hosts, key, repository, ports) and the EC2 instances the
runs use, via boto3."""
