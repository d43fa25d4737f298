package providertest

import (
	"slices"
	"testing"

	"github.com/switchboard/switchboard/gen"
	"github.com/switchboard/switchboard/internal/channels"
)

// seam is an optional interface of a session and the capabilities it serves: a session that implements it lists
// at least one of them, and a listed capability needs every seam that serves it (messages.template needs both a
// Sender and a Templater).
type seam struct {
	name string
	is   func(channels.Session) bool
	caps []channels.Capability
}

func implements[T any](s channels.Session) bool { _, ok := s.(T); return ok }

var seams = []seam{
	{"channels.Sender", implements[channels.Sender], []channels.Capability{channels.CapText, channels.CapMedia,
		channels.CapLocation, channels.CapContactCard, channels.CapReaction, channels.CapReply, channels.CapEdit,
		channels.CapDelete, channels.CapTemplate, channels.CapPoll}},
	{"channels.Templater", implements[channels.Templater], []channels.Capability{channels.CapTemplate}},
	{"channels.ReadMarker", implements[channels.ReadMarker], []channels.Capability{channels.CapMarkRead}},
	{"channels.ChatStater", implements[channels.ChatStater], []channels.Capability{channels.CapTyping}},
	{"channels.ChatOrganizer", implements[channels.ChatOrganizer], []channels.Capability{channels.CapArchive,
		channels.CapPin, channels.CapMute}},
	{"channels.PresenceSetter", implements[channels.PresenceSetter], []channels.Capability{channels.CapPresenceSend}},
	{"channels.GroupManager", implements[channels.GroupManager], []channels.Capability{channels.CapGroupsCreate,
		channels.CapGroupsManage, channels.CapGroupsInvite}},
	{"channels.ContactDirectory", implements[channels.ContactDirectory], []channels.Capability{
		channels.CapContactsLookup, channels.CapContactsBlock}},
	{"channels.Pairer", implements[channels.Pairer], []channels.Capability{channels.CapAuthPairing}},
	{"channels.Labeler", implements[channels.Labeler], []channels.Capability{channels.CapLabels}},
	{"channels.PictureReader", implements[channels.PictureReader], []channels.Capability{channels.CapContactsPicture}},
	{"channels.GroupConfigurer", implements[channels.GroupConfigurer], []channels.Capability{channels.CapGroupsSettings}},
	{"channels.PictureWriter", implements[channels.PictureWriter], []channels.Capability{channels.CapGroupsPicture,
		channels.CapProfilePicture}},
	{"channels.ProfileEditor", implements[channels.ProfileEditor], []channels.Capability{channels.CapProfileName,
		channels.CapProfileAbout}},
}

// auths pairs the auth capabilities with the auth methods: a provider lists one exactly when it has the other.
var auths = map[channels.Capability]channels.AuthMethod{
	channels.CapAuthQR: channels.AuthQR, channels.CapAuthPairing: channels.AuthPairingCode,
	channels.CapAuthToken: channels.AuthToken,
}

// Capabilities no seam serves: receipts, contacts' presence, calls and QR codes come through the sink (a call's
// decline is the sink's answer, which the session carries out), a token is the instance's config, and a proxy is
// the instance's way out (Instance.Via).
var unseamed = []channels.Capability{channels.CapDelivered, channels.CapRead, channels.CapPresenceRecv,
	channels.CapCallsReceive, channels.CapCallsReject, channels.CapAuthQR, channels.CapAuthToken, channels.CapProxy}

func (s *suite) capabilities(t *testing.T) {
	i := s.e.connect(t)
	sess := i.session(t)
	p := s.e.provider
	info := p.Info()
	if len(info.Capabilities) == 0 {
		t.Fatal("the provider lists no capability")
	}
	check := func(from string, caps []channels.Capability) {
		for _, c := range caps {
			if !gen.Capability(c).Valid() {
				t.Errorf("%s %q, which is not a capability of the API", from, c)
				continue
			}
			served := slices.Contains(unseamed, c)
			for _, sm := range seams {
				if !slices.Contains(sm.caps, c) {
					continue
				}
				served = true
				if !sm.is(sess) {
					t.Errorf("%s %s, but its session is no %s", from, c, sm.name)
				}
			}
			if !served {
				t.Errorf("%s %s, which the suite pairs with no interface (add it to the seams)", from, c)
			}
		}
	}
	check("the provider lists", info.Capabilities)
	for _, sm := range seams {
		if !sm.is(sess) {
			continue
		}
		if !slices.ContainsFunc(sm.caps, info.Has) {
			t.Errorf("the session is a %s, but the provider lists none of %v", sm.name, sm.caps)
		}
	}
	for c, m := range auths {
		if info.Has(c) != slices.Contains(info.AuthMethods, m) {
			t.Errorf("the provider lists %s: %v, and the auth method %s: %v (one goes with the other)", c,
				info.Has(c), m, slices.Contains(info.AuthMethods, m))
		}
	}
	if _, ok := p.(channels.Windowed); ok && !info.Has(channels.CapTemplate) {
		t.Errorf("the network takes free-form messages only within a window (channels.Windowed), yet the "+
			"provider lists no %s to write outside it", channels.CapTemplate)
	}
	if d, ok := sess.(channels.Discoverer); ok {
		found := d.Capabilities()
		for _, c := range found {
			if !info.Has(c) {
				t.Errorf("the connected session discovers %s, which the provider does not list (Info lists what "+
					"it can do at best)", c)
			}
		}
		check("the connected session discovers", found)
	}
}
