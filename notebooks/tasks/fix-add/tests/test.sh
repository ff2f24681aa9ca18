#!/bin/bash
# The verifier: writes 1 to the reward file when the test passes, 0 otherwise.
mkdir -p /logs/verifier
cd /app
if python3 /tests/test_calc.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
