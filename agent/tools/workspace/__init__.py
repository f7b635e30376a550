"""The built-in DingTalk workspace tools, one module each (its ``TOOL``): found by
``agent/tools/builtin.py``. Reads see what the robot's app may see (the directory,
free/busy, the asker's own to-dos); writes are acts."""
