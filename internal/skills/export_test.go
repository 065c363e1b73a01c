package skills

// Validations is how many times a call's arguments were validated against
// a skill's input schema (the prepared-call tests count them).
func Validations() int64 { return validations.Load() }

// Loaded reports whether the skill called name has its module loaded.
func (r *Registry) Loaded(name string) bool {
	s, err := r.get(name)
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mod != nil
}
