#!/bin/bash
# The verifier: a reward.json with the reward (1 when config.toml is right, 0 otherwise).
mkdir -p /logs/verifier
cd /app
if python3 /tests/check_config.py; then
  echo '{"reward": 1}' > /logs/verifier/reward.json
else
  echo '{"reward": 0}' > /logs/verifier/reward.json
fi
