package console

import "net/http"

// homePage is the data of the landing page: an admin's areas, or a door
// role's check-in lists.
type homePage struct {
	Doors []DoorLink
}

// DoorLink is a check-in list a session may open the door page of.
type DoorLink struct {
	ID    string
	Title string
}

// home is the landing page.
func (h *Handler) home(w http.ResponseWriter, r *request) {
	var data homePage
	if !r.grant.Admin() {
		doors, err := h.doorsOf(r)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		data.Doors = doors
	}
	h.render(w, r, http.StatusOK, "home", data)
}
