#!/bin/sh
# A scripted agent that reads the task and changes nothing. Expected outcome: no-change.
echo "read TASK.md; the client looks fine as it is"
exit 0
