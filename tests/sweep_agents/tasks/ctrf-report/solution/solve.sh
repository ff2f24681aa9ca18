#!/bin/bash
set -euo pipefail
echo '{"answer": 42}' > /workspace/report.json
echo "wrote /workspace/report.json"
