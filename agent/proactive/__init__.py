"""Work the robot starts itself: heartbeat, schedule, reminders, operator sends."""
