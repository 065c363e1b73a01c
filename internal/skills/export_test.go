package skills

// Validations is how many times a call's arguments were validated against
// a skill's input schema (the prepared-call tests count them).
func Validations() int64 { return validations.Load() }
