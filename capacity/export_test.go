package capacity

// LearnPools makes c know the pools field of the activity's counter, as
// a signup's answer would: the gate of that activity then holds its seats
// with one script where Redis allows it.
func LearnPools(c *Counter, activityID, pools string) { c.learnPools(activityID, pools) }
