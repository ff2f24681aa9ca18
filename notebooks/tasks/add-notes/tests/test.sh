#!/bin/bash
# The verifier: NOTES.md must exist in the working directory and hold the heading.
mkdir -p /logs/verifier
cd /app
if grep -qx '# Notes' NOTES.md 2>/dev/null; then
  echo 1 > /logs/verifier/reward.txt
else
  echo "NOTES.md is missing or has no '# Notes' line"
  echo 0 > /logs/verifier/reward.txt
fi
