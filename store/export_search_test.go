package store

// ActivityUserSQL is the statement of ActivityUserRegistrations, for the
// test of its plan.
const ActivityUserSQL = activityUserSQL
