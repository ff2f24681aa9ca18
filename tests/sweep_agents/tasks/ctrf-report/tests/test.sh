#!/bin/bash
# As published: the verifier's tools come from the environment's Dockerfile.
pytest /tests/test_outputs.py --ctrf /logs/verifier/ctrf.json -rA
if [ $? -eq 0 ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
